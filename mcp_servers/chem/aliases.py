"""The curated alias table: reagents the PubChem tables of ``chemicals`` lack, name badly, or map wrongly.

Each row is one purchasable identity: a preferred name, a SMILES (salts and complexes written as
disconnected fragments), the abbreviations chemists write, a category that drives the price model,
and a density for liquids (g/mL at 20-25 °C). Where ``chemicals`` already holds the structure, the
row only adds abbreviations to it (the catalogue merges rows by canonical SMILES). ``EDC`` is here
because the package maps it to 1,2-dichloroethane; in synthesis it means the carbodiimide, bought
as its hydrochloride. ``molar_mass_g_mol`` overrides the structure's mass only for supported
catalysts sold by loading (Pd/C: grams of material per mole of palladium).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Alias:
    name: str
    smiles: str
    abbreviations: tuple[str, ...] = ()
    category: str = "reagent"
    cas: str | None = None
    density_g_ml: float | None = None
    molar_mass_g_mol: float | None = None
    note: str = ""
    synonyms: tuple[str, ...] = field(default=())


PPH3 = "c1ccc(P(c2ccccc2)c2ccccc2)cc1"
DBA = "O=C(/C=C/c1ccccc1)/C=C/c1ccccc1"

ALIASES: tuple[Alias, ...] = (
    # Peptide coupling reagents and additives
    Alias("HATU", "CN(C)C(On1nnc2cccnc21)=[N+](C)C.F[P-](F)(F)(F)(F)F", ("HATU",), "coupling_reagent", "148893-10-1",
          synonyms=("1-[bis(dimethylamino)methylene]-1H-1,2,3-triazolo[4,5-b]pyridinium 3-oxid hexafluorophosphate",)),
    Alias("HBTU", "CN(C)C(On1nnc2ccccc21)=[N+](C)C.F[P-](F)(F)(F)(F)F", ("HBTU",), "coupling_reagent", "94790-37-1"),
    Alias("PyBOP", "F[P-](F)(F)(F)(F)F.O(n1nnc2ccccc21)[P+](N1CCCC1)(N1CCCC1)N1CCCC1", ("PyBOP",),
          "coupling_reagent", "128625-52-5"),
    Alias("1-hydroxybenzotriazole", "On1nnc2ccccc21", ("HOBt", "HOBT"), "coupling_reagent", "2592-95-2"),
    Alias("1-hydroxy-7-azabenzotriazole", "On1nnc2cccnc21", ("HOAt",), "coupling_reagent", "39968-33-7"),
    Alias("EDC hydrochloride", "CCN=C=NCCCN(C)C.Cl", ("EDC", "EDCI", "EDAC", "EDC.HCl", "EDC·HCl", "EDCI.HCl"),
          "coupling_reagent", "25952-53-8",
          synonyms=("1-ethyl-3-(3-dimethylaminopropyl)carbodiimide hydrochloride",
                    "N-(3-dimethylaminopropyl)-N'-ethylcarbodiimide hydrochloride")),
    Alias("N,N'-dicyclohexylcarbodiimide", "C(=NC1CCCCC1)=NC1CCCCC1", ("DCC",), "coupling_reagent", "538-75-0"),
    Alias("N,N'-diisopropylcarbodiimide", "CC(C)N=C=NC(C)C", ("DIC",), "coupling_reagent", "693-13-0",
          density_g_ml=0.806),
    Alias("1,1'-carbonyldiimidazole", "O=C(n1ccnc1)n1ccnc1", ("CDI",), "coupling_reagent", "530-62-1"),
    Alias("propylphosphonic anhydride", "CCCP1(=O)OP(=O)(CCC)OP(=O)(CCC)O1", ("T3P",), "coupling_reagent",
          "68957-94-8"),
    # Palladium catalysts and phosphine ligands
    Alias("[1,1'-bis(diphenylphosphino)ferrocene]dichloropalladium(II)",
          "Cl[Pd]Cl.[Fe+2].c1ccc(P(c2ccccc2)[c-]2cccc2)cc1.c1ccc(P(c2ccccc2)[c-]2cccc2)cc1",
          ("Pd(dppf)Cl2", "PdCl2(dppf)", "Pd(dppf)Cl₂"), "catalyst", "72287-26-4"),
    Alias("tetrakis(triphenylphosphine)palladium(0)", ".".join(["[Pd]"] + [PPH3] * 4),
          ("Pd(PPh3)4", "Pd(PPh₃)₄"), "catalyst", "14221-01-3"),
    Alias("tris(dibenzylideneacetone)dipalladium(0)", ".".join(["[Pd]", "[Pd]"] + [DBA] * 3),
          ("Pd2(dba)3", "Pd₂(dba)₃"), "catalyst", "51364-51-3"),
    Alias("palladium(II) acetate", "CC(=O)O[Pd]OC(C)=O", ("Pd(OAc)2", "Pd(OAc)₂"), "catalyst", "3375-31-3"),
    Alias("bis(triphenylphosphine)palladium(II) dichloride", f"Cl[Pd]Cl.{PPH3}.{PPH3}",
          ("Pd(PPh3)2Cl2", "PdCl2(PPh3)2"), "catalyst", "13965-03-2"),
    Alias("palladium on carbon (10 wt% Pd)", "[Pd]", ("Pd/C", "10% Pd/C", "Pd-C"), "catalyst", "7440-05-3",
          molar_mass_g_mol=1064.2, note="sold by loading: 1064.2 g of material holds one mole of Pd"),
    Alias("XPhos", "CC(C)c1cc(C(C)C)c(-c2ccccc2P(C2CCCCC2)C2CCCCC2)c(C(C)C)c1", ("XPhos",), "ligand", "564483-18-7",
          synonyms=("2-dicyclohexylphosphino-2',4',6'-triisopropylbiphenyl",)),
    Alias("SPhos", "COc1cccc(OC)c1-c1ccccc1P(C1CCCCC1)C1CCCCC1", ("SPhos",), "ligand", "657408-07-6",
          synonyms=("2-dicyclohexylphosphino-2',6'-dimethoxybiphenyl",)),
    Alias("RuPhos", "CC(C)Oc1cccc(OC(C)C)c1-c1ccccc1P(C1CCCCC1)C1CCCCC1", ("RuPhos",), "ligand", "787618-22-8"),
    Alias("BINAP", "c1ccc(P(c2ccccc2)c2ccc3ccccc3c2-c2c(P(c3ccccc3)c3ccccc3)ccc3ccccc23)cc1", ("BINAP", "rac-BINAP"),
          "ligand", "98327-87-8"),
    Alias("Xantphos", "CC1(C)c2cccc(P(c3ccccc3)c3ccccc3)c2Oc2c(P(c3ccccc3)c3ccccc3)cccc21", ("Xantphos",),
          "ligand", "161265-03-8"),
    Alias("triphenylphosphine", PPH3, ("PPh3", "PPh₃", "TPP"), "ligand", "603-35-0"),
    # Bases
    Alias("N,N-diisopropylethylamine", "CCN(C(C)C)C(C)C", ("DIPEA", "DIEA", "Hünig's base", "Hunig's base",
                                                                  "iPr2NEt", "EtN(iPr)2"), "base",
          "7087-68-5", density_g_ml=0.742),
    Alias("triethylamine", "CCN(CC)CC", ("TEA", "Et3N", "NEt3"), "base", "121-44-8", density_g_ml=0.726),
    Alias("4-dimethylaminopyridine", "CN(C)c1ccncc1", ("DMAP",), "base", "1122-58-3"),
    Alias("1,8-diazabicyclo[5.4.0]undec-7-ene", "C1CCC2=NCCCN2CC1", ("DBU",), "base", "6674-22-2",
          density_g_ml=1.018),
    Alias("N-methylmorpholine", "CN1CCOCC1", ("NMM",), "base", "109-02-4", density_g_ml=0.92),
    Alias("caesium carbonate", "O=C([O-])[O-].[Cs+].[Cs+]", ("Cs2CO3", "Cs₂CO₃", "cesium carbonate"), "base",
          "534-17-8"),
    Alias("potassium carbonate", "O=C([O-])[O-].[K+].[K+]", ("K2CO3", "K₂CO₃"), "base", "584-08-7"),
    Alias("potassium phosphate tribasic", "O=P([O-])([O-])[O-].[K+].[K+].[K+]", ("K3PO4", "K₃PO₄"), "base",
          "7778-53-2"),
    Alias("sodium tert-butoxide", "CC(C)(C)[O-].[Na+]", ("NaOtBu", "NaOt-Bu", "tBuONa"), "base", "865-48-5"),
    Alias("potassium tert-butoxide", "CC(C)(C)[O-].[K+]", ("KOtBu", "KOt-Bu", "tBuOK"), "base", "865-47-4"),
    Alias("lithium bis(trimethylsilyl)amide", "C[Si](C)(C)[N-][Si](C)(C)C.[Li+]", ("LiHMDS", "LHMDS"), "base",
          "4039-32-1"),
    Alias("sodium hydride", "[H-].[Na+]", ("NaH",), "base", "7646-69-7"),
    Alias("n-butyllithium", "[Li]CCCC", ("n-BuLi", "nBuLi", "BuLi"), "reagent", "109-72-8"),
    # Reducing agents, protecting-group and Wittig/Grignard reagents
    Alias("sodium triacetoxyborohydride", "CC(=O)O[BH-](OC(C)=O)OC(C)=O.[Na+]", ("NaBH(OAc)3", "STAB"),
          "reductant", "56553-60-7"),
    Alias("sodium borohydride", "[BH4-].[Na+]", ("NaBH4",), "reductant", "16940-66-2"),
    Alias("sodium cyanoborohydride", "[BH3-]C#N.[Na+]", ("NaBH3CN", "NaCNBH3"), "reductant", "25895-60-7"),
    Alias("di-tert-butyl dicarbonate", "CC(C)(C)OC(=O)OC(=O)OC(C)(C)C", ("Boc2O", "Boc₂O", "Boc anhydride"),
          "reagent", "24424-99-5"),
    Alias("trifluoroacetic acid", "O=C(O)C(F)(F)F", ("TFA", "CF3CO2H"), "acid", "76-05-1", density_g_ml=1.489),
    Alias("phenylmagnesium bromide", "Br[Mg]c1ccccc1", ("PhMgBr",), "reagent", "100-58-3"),
    Alias("methylmagnesium bromide", "C[Mg]Br", ("MeMgBr",), "reagent", "75-16-1"),
    Alias("methyltriphenylphosphonium bromide", "C[P+](c1ccccc1)(c1ccccc1)c1ccccc1.[Br-]", ("Ph3PCH3Br",),
          "reagent", "1779-49-3"),
    Alias("ethyl (triphenylphosphoranylidene)acetate", "CCOC(=O)C=P(c1ccccc1)(c1ccccc1)c1ccccc1",
          ("Ph3P=CHCO2Et",), "reagent", "1099-45-2"),
    Alias("N-bromosuccinimide", "O=C1CCC(=O)N1Br", ("NBS",), "reagent", "128-08-5"),
    Alias("3-chloroperbenzoic acid", "O=C(OO)c1cccc(Cl)c1", ("mCPBA", "m-CPBA"), "oxidant", "937-14-4"),
    Alias("tetrabutylammonium fluoride", "CCCC[N+](CCCC)(CCCC)CCCC.[F-]", ("TBAF",), "reagent", "429-41-4"),
    # Solvents (abbreviations; the structures are in the PubChem tables)
    Alias("tetrahydrofuran", "C1CCOC1", ("THF",), "solvent", "109-99-9", density_g_ml=0.889),
    Alias("N,N-dimethylformamide", "CN(C)C=O", ("DMF",), "solvent", "68-12-2", density_g_ml=0.944),
    Alias("dichloromethane", "ClCCl", ("DCM", "CH2Cl2", "methylene chloride"), "solvent", "75-09-2",
          density_g_ml=1.326),
    Alias("dimethyl sulfoxide", "CS(C)=O", ("DMSO",), "solvent", "67-68-5", density_g_ml=1.100),
    Alias("acetonitrile", "CC#N", ("MeCN", "ACN", "CH3CN"), "solvent", "75-05-8", density_g_ml=0.786),
    Alias("ethyl acetate", "CCOC(C)=O", ("EtOAc", "AcOEt"), "solvent", "141-78-6", density_g_ml=0.902),
    Alias("1,4-dioxane", "C1COCCO1", ("dioxane",), "solvent", "123-91-1", density_g_ml=1.033),
    Alias("toluene", "Cc1ccccc1", ("PhMe",), "solvent", "108-88-3", density_g_ml=0.867),
    Alias("methanol", "CO", ("MeOH", "CH3OH"), "solvent", "67-56-1", density_g_ml=0.792),
    Alias("ethanol", "CCO", ("EtOH",), "solvent", "64-17-5", density_g_ml=0.789),
    Alias("N-methyl-2-pyrrolidone", "CN1CCCC1=O", ("NMP",), "solvent", "872-50-4", density_g_ml=1.028),
    Alias("1,2-dimethoxyethane", "COCCOC", ("DME", "glyme"), "solvent", "110-71-4", density_g_ml=0.868),
    Alias("1,2-dichloroethane", "ClCCCl", ("DCE",), "solvent", "107-06-2", density_g_ml=1.253),
    Alias("diethyl ether", "CCOCC", ("Et2O", "ether"), "solvent", "60-29-7", density_g_ml=0.713),
    Alias("tert-butyl methyl ether", "COC(C)(C)C", ("MTBE", "TBME"), "solvent", "1634-04-4", density_g_ml=0.740),
    Alias("2-propanol", "CC(C)O", ("IPA", "iPrOH", "isopropanol"), "solvent", "67-63-0", density_g_ml=0.785),
    Alias("sulfuric acid", "O=S(=O)(O)O", ("H2SO4", "H₂SO₄"), "acid", "7664-93-9", density_g_ml=1.83),
    Alias("acetic acid", "CC(=O)O", ("AcOH", "HOAc", "CH3CO2H"), "acid", "64-19-7", density_g_ml=1.049),
    Alias("water", "O", ("H2O",), "solvent", "7732-18-5", density_g_ml=0.997),
)
