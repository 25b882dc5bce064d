"""Will this client read the speech as it arrives, or only once it is whole? Decided per request.

A streamed WAV cannot say its length (its header goes out before the audio exists), so it says "unknown"
(0xFFFFFFFF), which players read to the end of the stream but a saved file keeps: stdlib `wave` then
reports 2,147,483,647 frames. A client that reads the whole body before handing it over loses nothing
when the server waits for the last sample, and then gets a file with its real sizes and a Content-Length.
So the server buffers exactly when it knows the client does not stream, first signal that speaks wins:

1. `stream` in the body (our extension, as other OpenAI-style TTS servers name it): true or false.
2. `stream_format: "sse"`: events are a stream by definition.
3. The official OpenAI Python client says what it will do with the body in its own request headers:
   `with_streaming_response` sends `X-Stainless-Raw-Response: stream` (and reads the body as it comes);
   plain `audio.speech.create` and `with_raw_response` do not, and read the whole body before returning
   (`X-Stainless-Lang: python` marks the client). Other SDKs (the JS one returns a `fetch` Response whose
   body the caller may stream) give no such promise.
4. Otherwise (curl, browsers, other clients): streamed, as OpenAI's own API does, so first audio comes at
   TTFA; such a client asks for a whole file with `"stream": false`.
"""

from __future__ import annotations

from collections.abc import Mapping

RAW_RESPONSE_HEADER = "x-stainless-raw-response"  # the openai client's own marker, lower-cased
CLIENT_LANG_HEADER = "x-stainless-lang"


def client_streams(stream: bool | None, stream_format: str, headers: Mapping[str, str]) -> bool:
    """True when the response should be streamed (see the module docstring for the order)."""
    if stream is not None:
        return stream
    if stream_format == "sse":
        return True
    if headers.get(CLIENT_LANG_HEADER, "").lower() == "python":
        return headers.get(RAW_RESPONSE_HEADER, "").lower() == "stream"
    return True
