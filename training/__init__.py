"""The training workload: a time-limited TF Model Garden Faster R-CNN run on a synthetic detection dataset."""
