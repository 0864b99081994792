"""safetensors.flax is safeweights.flax (scripts/upstream-tests.sh runs the reference's flax comparison)."""
import safeweights.flax as _impl

globals().update({k: getattr(_impl, k) for k in dir(_impl) if not k.startswith("__")})
