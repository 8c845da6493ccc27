"""Series operations: replay a series onto a base, apply, export, port, and their resumable state."""
