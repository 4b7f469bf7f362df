"""WXQuery subscriptions over XML streams (paper 002): parsing, APT/APF abstraction, matching, merging, evaluation."""
