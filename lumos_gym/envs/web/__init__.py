"""The web family: WebShop on the offline shop site, and Mind2Web."""
