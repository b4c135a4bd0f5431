"""Test doubles, all in one place: the scripted OpenAI-compatible judge server, the webhook receiver, and the
in-process fake judge for pure metric tests. Real protocols on loopback; nothing here is monkeypatched in."""
