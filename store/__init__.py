"""The store both ingest and retrieval use: Chroma (the source of truth) and BM25 beside it.

Nothing outside this package imports chromadb or bm25s, or reads Chroma's shapes: chunks come
and go as `StoredChunk` records.
"""
