"""Every metric of lumos-gym: answers, QA, code, the WebShop reward, games, Mind2Web steps."""
