"""The math family: GSM8K, SVAMP, ASDiv and the procedural MathWord."""
