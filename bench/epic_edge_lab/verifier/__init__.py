"""Training the learned verifier: train.py (train, export ONNX), nets.py, cv.py."""
