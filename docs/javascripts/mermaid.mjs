// Draws the ```mermaid blocks (rendered by pymdownx.superfences as <div class="mermaid">).
import mermaid from "https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.esm.min.mjs";

mermaid.initialize({ startOnLoad: true });
