"""The multimodal family: A-OKVQA, ScienceQA and the generated Scenes."""
