"""Two agents of one's own, for docs/agents.md ("Write your own agent").

``calculator.CalculatorAgent`` follows rules and asks no model; ``ask_model.ExpressionAgent``
asks a model through the ``policy`` role. tests/test_own_agents.py runs both through the
command line.
"""
