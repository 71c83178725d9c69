"""Typed program -> comparison tree -> InfoFlow schedule -> the analysis report."""
