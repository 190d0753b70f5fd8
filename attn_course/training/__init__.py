"""Training: the masked loss and the training loop, checkpoints, and the runtime (device, seeds,
the folder where chapters keep the models they train).
"""
