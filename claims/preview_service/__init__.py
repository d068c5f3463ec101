"""Previews run in preview worker processes, never on the web process's GIL (claims.preview_service.dispatch)."""
