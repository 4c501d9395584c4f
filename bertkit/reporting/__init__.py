"""Pictures, report.html and the model card of a model directory (matplotlib is the `report` extra)."""
