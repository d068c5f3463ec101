"""DeviceTaintRules: which devices a rule taints (the scheduler's ResourceSlice tracker).

`spec.deviceSelector` has `driver`, `pool` and `device` in v1.36 (v1alpha3 and v1beta2). The
v1alpha3 rules of Kubernetes 1.33/1.34 could also select by `deviceClassName` and by CEL
`selectors`; both fields were removed ("tombstoned") in 1.35, so a v1.36 API server never serves
them. When a rule still carries them (a dump of an older cluster), they are applied the way that
cluster's tracker applied them:

* `deviceClassName` naming no DeviceClass: the rule applies to no device;
* the class's selectors, then the rule's selectors, must all be true; a CEL runtime error means
  "not selected" for that device (the tracker emits a CELRuntimeError event, noted as a problem);
* a CEL compile error makes the rule unusable (reported as a problem; the rule taints nothing);
* CEL sees the device without `allowMultipleAllocations` (the tracker does not pass it).
"""

from .cel import CelCompileError, CelRuntimeError, compile_selector, make_device
from .matching import evaluate_chain


class RuleMatcher:
    """One rule, compiled once; `selects(device)` tells whether the rule taints it."""

    def __init__(self, rule, classes):
        meta, spec = rule.get("metadata") or {}, rule.get("spec") or {}
        self.name = meta.get("name") or ""
        self.taint = spec.get("taint")
        sel = spec.get("deviceSelector") or {}
        self.driver, self.pool, self.device = sel.get("driver"), sel.get("pool"), sel.get("device")
        self.problem = None
        self.runtime_error = None
        self.usable = bool(self.taint)
        self.exprs = []  # [(owner, index, compiled, expression)]: the search's selector chain shape
        class_name = sel.get("deviceClassName")
        if class_name:
            cls = classes.get(class_name)
            if cls is None:
                self.usable = False  # upstream: "DeviceTaintRule does not apply, DeviceClass does not exist"
            else:
                self._compile(cls.selectors, f"class {class_name}")
        self._compile(sel.get("selectors") or [], "")

    def _compile(self, selectors, owner):
        for i, s in enumerate(selectors):
            expr = ((s or {}).get("cel") or {}).get("expression")
            if not expr or not self.usable:
                continue  # selectors of an unknown type are skipped, as upstream
            try:
                self.exprs.append((owner, i, compile_selector(expr), expr))
            except CelCompileError as exc:
                where = f"{owner}: " if owner else ""
                self.problem = f"DeviceTaintRule {self.name}: {where}selector #{i}: CEL compile error: {exc.message}; the rule taints no device"
                self.usable = False

    def selects(self, dev):
        if not self.usable:
            return False
        if (
            (self.driver and self.driver != dev.driver)
            or (self.pool and self.pool != dev.pool)
            or (self.device and self.device != dev.name)
        ):
            return False
        if not self.exprs:
            return True
        if dev.multi:  # the tracker's CEL view lacks allowMultipleAllocations: evaluate apart
            res = _evaluate_plain(dev, self.exprs)
        else:
            res = evaluate_chain(dev, self.exprs)  # cached and shared like the search's selectors
        if res is True or res is False:
            return res
        owner, i, exc = res
        if self.runtime_error is None:
            where = f"{owner}: " if owner else ""
            self.runtime_error = (
                f"DeviceTaintRule {self.name}: {where}selector #{i}: CEL runtime error on device {dev.id}: "
                f"{getattr(exc, 'message', None) or exc} (such devices are not tainted)"
            )
        return False

    def tainted(self):
        return dict(self.taint, rule=self.name)


def apply_rules(rules, classes, devices):
    """Append each rule's taint to the devices it selects; returns the problems found (texts by rule name)."""
    problems = {}
    for rule in rules:
        matcher = RuleMatcher(rule, classes)
        if matcher.usable:
            for dev in devices:
                if matcher.selects(dev):
                    dev.taints = (
                        *dev.taints,
                        matcher.tainted(),
                    )  # a new tuple: the empty one is shared (model.device_taints)
        text = matcher.problem or matcher.runtime_error
        if text:
            problems[matcher.name] = text
    return problems


def _evaluate_plain(dev, exprs):
    view = make_device(dev.driver, dev.attributes, dev.raw.get("capacity") or {})
    for owner, i, compiled, _ in exprs:
        try:
            if not compiled.evaluate(view):
                return False
        except (CelRuntimeError, ValueError) as exc:
            return (owner, i, exc)
    return True
