"""`vox serve`: the OpenAI-style speech API over the engine (one more client of `Engine.submit`).

    app.py        build the FastAPI app around a SpeechService (lifespan, error handlers)
    routes.py     /v1/audio/speech, /v1/audio/voices, /v1/models, /health, /metrics
    live.py       text streaming in: the WebSocket endpoint
    service.py    the engine session + one speech job per request (a thread bridging to asyncio)
    encoding.py   response bodies: streamed WAV (open-ended header) / PCM, FLAC/MP3, SSE framing
    metrics.py    Prometheus metrics (a registry per app)
    guard.py      API key, body size and time limits, one-sentence errors
    protocol.py   the uvicorn config and its h11 protocol with a header deadline (slowloris), JSON 400s
    delivery.py   whether a streamed body reached its client (done vs stopped_reading)
    cli.py        `vox serve`: its flags, checked before anything loads, then one engine or the cluster

The engine session comes from the session layer (`voxcli.session`); scale-out on Ray Serve lives in
`voxcli.cluster`. Nothing here imports the `vox` CLI.
"""
