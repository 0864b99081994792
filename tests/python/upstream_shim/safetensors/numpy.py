"""safetensors.numpy is safeweights.numpy, private helpers included (transformers imports some)."""
import safeweights.numpy as _impl

globals().update({k: getattr(_impl, k) for k in dir(_impl) if not k.startswith("__")})
