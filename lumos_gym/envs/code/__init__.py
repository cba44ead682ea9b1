"""The code family: HumanEval and MBPP."""
