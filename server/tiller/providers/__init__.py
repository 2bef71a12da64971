"""Model providers behind one ABC with one streaming method (``base``): OpenAI's Responses API
and OpenAI-compatible Chat Completions (``openai``; its requests in ``openai_request``, streams in
``openai_responses`` and ``openai_stream``, failures in ``openai_errors``, the catalogue in
``openai_models``, a server's own model in ``served``), Anthropic Messages (``anthropic``,
``anthropic_request``, ``anthropic_stream``), GGUF models in-process (``local``); streamed
tool-call arguments (``tool_arguments``); and the registry of provider settings, the model
catalog and the factory (``registry``). SDKs are imported on the first model call.
"""
