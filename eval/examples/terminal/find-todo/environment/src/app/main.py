def main():
    # TODO: parse arguments
    return 0
