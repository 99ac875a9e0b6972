"""The disaster demo: one task per dimension through the server over MCP, and a map of the event.

    from gauntlet.mcp_servers.disaster.demo import run_demo
    run_demo(Path("demo-out"))
"""

from __future__ import annotations

import json
from pathlib import Path

DEMO_EVENT = "ahr-2021-flood"
DEMO_CATEGORIES = {"T1": "affected_area", "T2": "exposed_population", "T3": "rescue_route", "T4": "t4_trend"}


def run_demo(out_dir: Path) -> None:
    """Build a small scene (cached), solve one T1, T2, T3 and T4 (the flood's trend over its five dates)
    task through an MCP client session, grade each with the DORA scorer, and save ``disaster-map.png`` in
    ``out_dir``."""
    import anyio
    from mcp.shared.memory import create_connected_server_and_client_session

    from gauntlet.bridges.mcp_compat import validate_once
    from gauntlet.mcp_servers.disaster import data, scoring, tasks, tasks_temporal
    from gauntlet.mcp_servers.disaster.server import build_server
    from gauntlet.tasks import GoldCall, ToolTask

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    scene_root = data.build_subset([DEMO_EVENT], size_px=128) / "scenes"
    event = json.loads((scene_root / "events.json").read_text())["events"][0]
    print(f"event {event['id']}: {event['hazard']} at {event['place']}, {event['country']} ({event['date']}), "
          f"EPSG:{event['epsg']} - a synthetic scene at a real location")
    specs = {spec.category: spec for spec in [*tasks._templates(event),
                                              *tasks_temporal.temporal_templates(event, scene_root)]}
    truth = tasks.truth_context(scene_root, event["id"])
    server = build_server(scene_root, workspace_dir=out_dir / "workspace")
    outputs: dict[str, list] = {}

    async def solve() -> None:
        async with create_connected_server_and_client_session(server) as session:
            validate_once(session)
            print(f"server 'disaster': {len((await session.list_tools()).tools)} tools")
            for dimension, category in DEMO_CATEGORIES.items():
                spec = specs[category]
                trajectory, results = await tasks.execute_plan(session, spec.plan)
                outputs[category] = results
                answer = spec.answer(results)
                gold = [GoldCall.model_validate(step) for step in trajectory]
                task = ToolTask(id=f"{event['id']}/{category}", question=spec.question, gold_trajectory=gold,
                                answer=answer, metadata={"dimension": dimension, "eval_spec": spec.eval_spec})
                true_answer = spec.truth(truth) if spec.truth else None
                report = scoring.score_task(task, answer, trajectory)
                print(f"\n[{dimension}] {spec.question}")
                for step in trajectory:
                    print(f"  {step['call']}({', '.join(f'{k}={_short(v)}' for k, v in step['args'].items())})")
                check = (scoring.grade_answer(spec.eval_spec, true_answer, answer)[2] if true_answer is not None
                         else "n/a")
                print(f"  answer {answer!r}; generator truth {true_answer!r}; DORA check of the answer against the "
                      f"truth: {check}; trajectory in-order {report.trajectory['tool_in_order']:.2f}")

    anyio.run(solve)
    path = save_map(scene_root, event["id"], server.state, outputs, out_dir / "disaster-map.png")
    print(f"\nmap of the event: {path}")


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 48 else text[:45] + "..."


def save_map(scene_root: Path, event_id: str, ws, outputs: dict[str, list], path: Path) -> Path:
    """Post-event image with the detected flood, building footprints, road states and the rescue route."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import rasterio
    from rasterio.plot import plotting_extent

    from gauntlet.mcp_servers.disaster import vectors

    folder = scene_root / event_id
    with rasterio.open(folder / "post_optical.tif") as src:
        rgb = src.read([1, 2, 3]).astype(float)
        extent = plotting_extent(src)
        epsg = src.crs.to_epsg()
    rgb = np.clip(np.moveaxis(rgb, 0, -1) / np.percentile(rgb, 99), 0, 1)
    fig, ax = plt.subplots(figsize=(8, 8), dpi=110)
    ax.imshow(rgb, extent=extent)
    flood_step = outputs["affected_area"][-2]
    with rasterio.open(ws.resolve(flood_step["path"])) as src:
        mask = src.read(1)
        ax.imshow(np.ma.masked_where(mask == 0, mask), extent=plotting_extent(src), cmap="cool", alpha=0.45,
                  vmin=0, vmax=1)
    buildings, _ = vectors.read_features(folder / "buildings.geojson")
    for geom in vectors.geometries(buildings):
        ax.plot(*geom.exterior.xy, color="white", linewidth=0.4)
    road_layer = next(r["path"] for r in outputs["rescue_route"] if isinstance(r, dict) and "road-state" in
                      str(r.get("path", "")))
    roads, _ = vectors.read_features(ws.resolve(road_layer))
    colours = {"intact": "#dddddd", "flooded": "#1f77ff", "blocked": "#ff3b30"}
    for feature, geom in zip(roads, vectors.geometries(roads)):
        ax.plot(*geom.xy, color=colours[feature["properties"]["state"]], linewidth=1.2)
    route, _ = vectors.read_features(ws.resolve(outputs["rescue_route"][-1]["path"]))
    for geom in vectors.geometries(route):
        ax.plot(*geom.xy, color="#ffd60a", linewidth=3)
    pois, _ = vectors.read_features(folder / "pois.geojson")
    for feature, geom in zip(pois, vectors.geometries(pois)):
        ax.plot(geom.x, geom.y, marker="o", color="black", markersize=5)
        ax.annotate(feature["properties"]["type"], (geom.x, geom.y), fontsize=7, color="white",
                    xytext=(3, 3), textcoords="offset points")
    ax.set_title(f"{event_id}: detected new water (magenta), road states (blue flooded, red blocked), rescue route "
                 f"(yellow)\nsynthetic scene at a real location, EPSG:{epsg}", fontsize=8)
    ax.set_xlabel("easting (m)")
    ax.set_ylabel("northing (m)")
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return path
