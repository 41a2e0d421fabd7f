"""Generator backends. Each module imports its heavy library (torch, vllm, httpx) only when used."""
