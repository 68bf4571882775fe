"""The OpenAI-compatible server: the loaded model on localhost for editors, agents and scripts.

Qt-free. `app.py` is the ASGI application (Starlette, served by uvicorn), `protocol.py` turns a
request body into a typed call or an OpenAI-style 400, `runner.py` runs a call on the one engine
thread (through an `EngineHost`: the CLI's own, or the window's bridge) and streams its events
back, `slots.py` picks the kept conversation state a request continues, `admission.py` bounds
the queue. docs/server.md says what a client can rely on.
"""
