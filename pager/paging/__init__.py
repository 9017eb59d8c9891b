"""What one turn's page is made of: the pinned block, the page and its report, token budgets,
the fence, and the assembler that puts them together."""
