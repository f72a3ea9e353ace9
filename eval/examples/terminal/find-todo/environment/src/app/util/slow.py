# TODO make this faster
def slow():
    pass
