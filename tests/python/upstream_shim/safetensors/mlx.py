"""safetensors.mlx is safeweights.mlx (scripts/upstream-tests.sh runs the reference's mlx comparison)."""
import safeweights.mlx as _impl

globals().update({k: getattr(_impl, k) for k in dir(_impl) if not k.startswith("__")})
