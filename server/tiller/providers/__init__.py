"""Model providers behind one ABC with one streaming method (``base``): OpenAI's Responses API and
OpenAI-compatible Chat Completions (``openai``, over ``http``; its requests in ``openai_request``,
streams in ``openai_responses`` and ``openai_stream``, failures in ``openai_errors``, the catalogue
in ``openai_models``, a server's own model in ``served``), Anthropic Messages (``anthropic``,
``anthropic_request``, ``anthropic_stream``), GGUF models in-process (``local``); streamed tool-call
arguments (``tool_arguments``); the registry of provider settings, the model catalog and the factory
(``registry``; Anthropic's catalog: ``anthropic_models``); the providers' own model lists
(``models_endpoint``) merged and cached (``directory``); thinking levels against what a model takes
(``levels``). The HTTP library is imported on the first model call (or by the warm-up).
"""
