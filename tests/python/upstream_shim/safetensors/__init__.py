"""Import shim for the reference safetensors' own tests (scripts/upstream-tests.sh): `safetensors` is
safeweights, so the upstream suite exercises our package unchanged. Test-only; never installed."""
import safeweights as _impl

globals().update({k: getattr(_impl, k) for k in dir(_impl) if not k.startswith("__")})
__version__ = _impl.__version__
