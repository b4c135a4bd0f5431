"""The self-contained HTML report: data read from the warehouse, rendered with Jinja2."""

__all__: list[str] = []
