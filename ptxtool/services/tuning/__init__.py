"""What `ptxtool tune` (services/tune.py) is made of: the search space and its candidate generators (`space`), and the
worker that verifies and times candidates on one GPU (`worker`)."""
