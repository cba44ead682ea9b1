"""The complex-QA family: HotpotQA, StrategyQA, MuSiQue, 2Wiki, Bamboogle and WorldQA."""
