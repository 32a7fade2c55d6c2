"""`python -m training infer`: latency, throughput and memory of a run's exported model, per runtime.

One small module per runtime under training/inference/runtimes/; each can refuse a model with a reason
(`CannotTake`), which is recorded, never skipped silently. The torch path never imports TensorFlow.
"""
