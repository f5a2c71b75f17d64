# bash completion for pmcachectl(8)
_pmcachectl_volumes()
{
	pmcachectl --json volume list 2>/dev/null |
		sed -n 's/^ *"name": *"\([^"]*\)".*/\1/p'
}

_pmcachectl()
{
	local cur prev words cword
	_init_completion || return
	local cmds="status stats volume set get flush shutdown check format dump disks version help"
	local keys="mode admit_after_misses seq_cutoff nospace log.level writeback.high_pct
		writeback.low_pct writeback.max_age_ms writeback.max_io writeback.max_inflight
		writeback.busy_inflight writeback.idle_ms writeback.retry_ms writeback.stall_ms"

	case $prev in
	-s | --socket | -c | --config)
		_filedir
		return
		;;
	-v | --volume)
		COMPREPLY=($(compgen -W "$(_pmcachectl_volumes)" -- "$cur"))
		return
		;;
	-t | --timeout)
		COMPREPLY=($(compgen -W "5 10 30 60 300 0" -- "$cur"))
		return
		;;
	-i | --interval | -n | --count | --limit | --block-size | --max-volumes | --size)
		return
		;;
	esac

	local cmd="" sub="" i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-s | --socket | -c | --config | -v | --volume | -i | --interval | -n | --count | \
			--limit | --block-size | --max-volumes | --size | -t | --timeout)
			((i++))
			;;
		-*) ;;
		*)
			if [[ -z $cmd ]]; then
				cmd=${words[i]}
			elif [[ $cmd == volume && -z $sub ]]; then
				sub=${words[i]}
			fi
			;;
		esac
	done

	if [[ $cur == -* ]]; then
		local opts="--socket --config --timeout --json --help"
		case $cmd in
		stats) opts+=" --watch --interval --count --histograms --prometheus --volume" ;;
		set | get | flush) opts+=" --volume" ;;
		volume)
			[[ $sub == remove ]] && opts+=" --force"
			[[ $sub == add ]] && opts+=" --replace-disk --discard-dirty"
			;;
		shutdown) opts+=" --remove-devices" ;;
		check) opts+=" --repair" ;;
		format) opts+=" --force --block-size --max-volumes --size" ;;
		dump) opts+=" --all --limit" ;;
		esac
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	case $cmd in
	"") COMPREPLY=($(compgen -W "$cmds" -- "$cur")) ;;
	volume)
		if [[ -z $sub ]]; then
			COMPREPLY=($(compgen -W "add remove list reconnect clear-error" -- "$cur"))
		elif [[ $sub == remove || $sub == reconnect || $sub == clear-error ]]; then
			COMPREPLY=($(compgen -W "$(_pmcachectl_volumes)" -- "$cur"))
		elif [[ $sub == add ]]; then
			case $cur in
			mode=*) COMPREPLY=($(compgen -W "write-back write-through write-around pass-through" -- "${cur#mode=}")) ;;
			/*) _filedir ;;
			*) COMPREPLY=($(compgen -W "mode= admit_after_misses= seq_cutoff= nospace= ublk_id=" -- "$cur")); compopt -o nospace ;;
			esac
		fi
		;;
	stats | flush) COMPREPLY=($(compgen -W "$(_pmcachectl_volumes)" -- "$cur")) ;;
	set | get)
		if [[ $prev == mode ]]; then
			COMPREPLY=($(compgen -W "write-back write-through write-around pass-through" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$keys" -- "$cur"))
		fi
		;;
	check | format | dump) _filedir ;;
	esac
} && complete -F _pmcachectl pmcachectl
