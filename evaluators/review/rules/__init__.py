"""One module per rule. The registry (`evaluators.review.registry`) discovers them here."""
