"""safetensors.torch is safeweights.torch, private helpers included (transformers imports some)."""
import safeweights.torch as _impl

globals().update({k: getattr(_impl, k) for k in dir(_impl) if not k.startswith("__")})
