"""The text-game family: TextWorld, ALFWorld and TextWorldExpress."""
