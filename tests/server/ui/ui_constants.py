"""Values the test app (ui_app.py, run by ``turnkit serve``) and the browser tests share."""

HOSTILE = '<script>window.__pwned = "script"</script><img src=x onerror="window.__pwned=\'img\'">'
WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
