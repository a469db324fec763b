mod topo;
