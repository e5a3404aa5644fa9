"""Adapters that put the parrot-parents pipeline behind other frameworks' retriever APIs.

* :mod:`parrot_parents.integrations.langchain`: ``ParentChildRetriever``, a langchain-core
  ``BaseRetriever`` (langchain-core is a dependency of the package);
* :mod:`parrot_parents.integrations.llamaindex`: ``ParentChildLlamaRetriever``, a
  llama-index-core ``BaseRetriever`` (optional extra ``[llamaindex]``).

Both sit at the edge of the package: they wrap a :class:`~parrot_parents.bots.Chatbot`
and add nothing to the query core.
"""
