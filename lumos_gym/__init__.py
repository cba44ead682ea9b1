"""lumos-gym: Gymnasium environments, agents and training for Lumos-style language agents."""

__version__ = "0.1.0"

from lumos_gym import envs as envs  # noqa: E402  (registers the lumos/* env ids)
