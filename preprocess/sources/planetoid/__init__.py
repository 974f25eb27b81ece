"""Planetoid citation graphs (Cora, CiteSeer, PubMed): the ind.NAME.* files and their download."""
