"""Structure similarity over the catalogue: Morgan fingerprints (radius 2, 2048 bits), Tanimoto."""

from __future__ import annotations

from gauntlet.mcp_servers.chem.store import CatalogueStore

RADIUS = 2
N_BITS = 2048


class SimilarityIndex:
    """Fingerprints of every catalogue chemical, computed on first use."""

    def __init__(self, catalogue: CatalogueStore):
        self.catalogue = catalogue
        self._ids: list[int] | None = None
        self._fingerprints: list = []

    def _fingerprint(self, smiles: str):
        from rdkit import Chem
        from rdkit.Chem import rdFingerprintGenerator

        generator = rdFingerprintGenerator.GetMorganGenerator(radius=RADIUS, fpSize=N_BITS)
        return generator.GetFingerprint(Chem.MolFromSmiles(smiles))

    def most_similar(self, smiles: str, limit: int) -> list[tuple[int, float]]:
        """(chemical id, Tanimoto) of the ``limit`` most similar chemicals to canonical ``smiles``."""
        from rdkit import DataStructs

        if self._ids is None:
            structures = self.catalogue.all_structures()
            self._fingerprints = [self._fingerprint(s) for _, s in structures]
            self._ids = [chemical_id for chemical_id, _ in structures]
        scores = DataStructs.BulkTanimotoSimilarity(self._fingerprint(smiles), self._fingerprints)
        ranked = sorted(zip(self._ids, scores), key=lambda item: (-item[1], item[0]))
        return ranked[:limit]
