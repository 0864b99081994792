"""safetensors.paddle is safeweights.paddle (scripts/upstream-tests.sh runs the reference's paddle comparison)."""
import safeweights.paddle as _impl

globals().update({k: getattr(_impl, k) for k in dir(_impl) if not k.startswith("__")})
