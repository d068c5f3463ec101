"""Release actions for stuck claims: planning (plans), the API server requests (transport), the audit
entry (audit), and the action that runs them in order (actions)."""
