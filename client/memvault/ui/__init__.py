"""`memvault ui`: a memory browser served on 127.0.0.1 to this user's browser alone.

`guard.py` (who may ask: the one-time token, the session cookie, Host and
Origin checks, the security headers), `pages.py` (the pages, rendered on
the server from `templates/`, each a few `memvault.Client` calls),
`actions.py` (the forms that change the vault), `recent.py` (the daemon's
events, kept for the Vault page) and `server.py` (uvicorn on a free port,
the browser opened). It reaches the daemon only through `memvault.Client`,
like any other client; the daemon gains no listener. `static/` holds every
asset a page loads: nothing comes from anywhere else.
"""
