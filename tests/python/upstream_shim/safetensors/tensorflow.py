"""safetensors.tensorflow is safeweights.tensorflow (scripts/upstream-tests.sh runs the reference's tensorflow comparison)."""
import safeweights.tensorflow as _impl

globals().update({k: getattr(_impl, k) for k in dir(_impl) if not k.startswith("__")})
