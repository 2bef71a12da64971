"""Model providers behind one ABC with one streaming method (``base``): OpenAI-compatible Chat
Completions (``openai``, ``openai_stream``), Anthropic Messages (``anthropic``,
``anthropic_request``, ``anthropic_stream``), GGUF models in-process (``local``); streamed
tool-call arguments (``tool_arguments``); and the registry of provider settings, the model
catalog and the factory (``registry``). SDKs are imported on the first model call.
"""
