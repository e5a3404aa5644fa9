"""Parts of the ``ai_parrot`` benchmark (``benchmarks/quality/ai_parrot.py``): the harness
every row runs in, ai-parrot's own route, and the rows of parrot-parents' integration."""
