def load_batch(i):
    raise ValueError(f"batch {i} is corrupt")


for i in range(3):
    load_batch(i)
